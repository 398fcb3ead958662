"""Secret redaction: names, token formats, flags, free text — and what must survive."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from driftwatch.redact import (
    REDACTED,
    is_secret_flag,
    is_secret_name,
    looks_like_token,
    redact_argv,
    redact_env,
    redact_text,
    redact_value,
)

HF = "hf_abcdefghijklmnopqrstuvwxyz123456"
TOKENS = [
    HF,
    "sk-abcdefabcdefabcdefabcdef",
    "sk-proj-AbCdEf0123456789_abcdefGHIJ-klmn",
    "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
    "ghp_" + "a" * 36,
    "gho_" + "B1" * 18,
    "ghs_" + "c" * 36,
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "AKIAIOSFODNN7EXAMPLE",
    "ASIAIOSFODNN7EXAMPLE",
    "xoxb-1234567890-abcdefghij",
    "xoxp-1234567890-abcdefghij",
    "glpat-abcdefghij0123456789",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "AIza" + "x" * 35,
    "sk_live_" + "a1" * 12,
    "npm_" + "a" * 36,
]


@pytest.mark.parametrize(
    "name",
    ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID",
     "AWS_SESSION_TOKEN", "OPENAI_API_KEY", "OPENAI_KEY", "ANTHROPIC_APIKEY", "GITHUB_TOKEN", "GH_AUTHTOKEN",
     "DB_PASSWORD", "MYSQL_PWD", "REDIS_PASSWD", "SSH_PASSPHRASE", "GOOGLE_APPLICATION_CREDENTIALS",
     "CLIENT_SECRET", "SECRETS", "NCCL_TEST_SECRET", "SSL_PRIVATE_KEY", "BASIC_AUTH", "HTTP_AUTHORIZATION",
     "SENTRY_DSN", "api_key", "token", "hf_token", "Api-Key", "SESSION_COOKIE", "PGPASSWORD"],
)
def test_credential_names_are_secret(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["TOKENIZERS_PARALLELISM", "SGLANG_MAX_TOKENS", "SGL_CHUNKED_PREFILL_TOKENS", "NCCL_IB_PKEY", "NCCL_IB_HCA",
     "NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME", "CUDA_VISIBLE_DEVICES", "GIT_AUTHOR_NAME", "SSH_AUTH_SOCK",
     "PWD", "OLDPWD", "PYTORCH_CUDA_ALLOC_CONF", "HF_HOME", "HF_HUB_ENABLE_HF_TRANSFER", "KEYBOARD", "MONKEY",
     "SSL_KEYFILE", "PASSTHROUGH", "HOME", "PATH"],
)
def test_harmless_names_are_kept(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize("token", TOKENS)
def test_token_formats_are_found_inside_values(token: str) -> None:
    assert looks_like_token(token)
    assert redact_value(f"Bearer {token}; rest") == f"Bearer {REDACTED}; rest"


@pytest.mark.parametrize(
    "value",
    ["task-something-long-name-here-abc", "hf_transfer", "/data/models/meta-llama/Llama-3.1-8B",
     "AKIAIOSFODNN7EXAMPLEX", "mlx5_0:1,mlx5_1:1", "0.55", "eyJ", "skill-sk-"],
)
def test_ordinary_values_are_not_tokens(value: str) -> None:
    assert not looks_like_token(value) and redact_value(value) == value


def test_url_password_goes_and_the_rest_stays() -> None:
    assert redact_value("https://user:s3cret@pypi.example.com/simple") == f"https://user:{REDACTED}@pypi.example.com/simple"
    assert redact_value("https://pypi.org/simple") == "https://pypi.org/simple"


def test_redact_env() -> None:
    env = {"HF_TOKEN": "anything", "NCCL_DEBUG": "INFO", "NOTE": f"x={HF}", "TOKENIZERS_PARALLELISM": "false"}
    assert redact_env(env) == {"HF_TOKEN": REDACTED, "NCCL_DEBUG": "INFO", "NOTE": f"x={REDACTED}",
                               "TOKENIZERS_PARALLELISM": "false"}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--api-key", "plain"], ["--api-key", REDACTED]),
        (["--api-key=plain"], [f"--api-key={REDACTED}"]),
        (["--admin-api-key", "p", "--port", "1"], ["--admin-api-key", REDACTED, "--port", "1"]),
        (["--hf-token", "x", "--token=y", "--password", "-starts-with-dash"],
         ["--hf-token", REDACTED, f"--token={REDACTED}", "--password", REDACTED]),
        (["--secret", "--port", "1"], ["--secret", "--port", "1"]),  # a switch: the next flag is not its value
        (["--api_key", "x"], ["--api_key", REDACTED]),
        (["--tokenizer-path", "/m/tok", "--max-total-tokens", "4096"], ["--tokenizer-path", "/m/tok", "--max-total-tokens", "4096"]),
        (["env", f"HF_TOKEN={HF}", "OTHER=1", "python"], ["env", f"HF_TOKEN={REDACTED}", "OTHER=1", "python"]),
        (["--model", HF, "--x=" + HF], ["--model", REDACTED, f"--x={REDACTED}"]),
        (["--foo", "-1"], ["--foo", "-1"]),
    ],
)
def test_redact_argv(argv: list[str], expected: list[str]) -> None:
    assert redact_argv(argv) == expected


def test_secret_flags() -> None:
    assert is_secret_flag("--api-key") and is_secret_flag("--ssl-keyfile-password") and is_secret_flag("-password")
    assert not is_secret_flag("--ssl-keyfile") and not is_secret_flag("--tokenizer-mode") and not is_secret_flag("-")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("server_args=ServerArgs(model_path='/m', api_key='abc123xyz', admin_api_key=None, tp_size=8)",
         f"server_args=ServerArgs(model_path='/m', api_key='{REDACTED}', admin_api_key=None, tp_size=8)"),
        ("non-default args: {'api_key': ['k1'], 'hf_token': 'abc', 'model': 'm'}",
         f"non-default args: {{'api_key': ['{REDACTED}'], 'hf_token': '{REDACTED}', 'model': 'm'}}"),
        ("args: api_key=[k1, k2] token=[]", f"args: api_key=[{REDACTED}] token=[]"),
        ('{"api_key": "abc", "port": 1}', '{"api_key": "' + REDACTED + '", "port": 1}'),
        ("launching: python -m sglang.launch_server --api-key abc --port 30000",
         f"launching: python -m sglang.launch_server --api-key {REDACTED} --port 30000"),
        ("export HF_TOKEN=whatever; PASSWORD: hunter2", f"export HF_TOKEN={REDACTED}; PASSWORD: {REDACTED}"),
        ("Authorization: Bearer abcdefghijkl", f"Authorization: Bearer {REDACTED}"),
        ("Decode batch. #running-req: 1, #token: 1234, token usage: 0.01", None),
        ("max_total_num_tokens=123456, context_len=8192", None),
        (f"loaded token {HF} ok", f"loaded token {REDACTED} ok"),
    ],
)
def test_redact_text(text: str, expected: str | None) -> None:
    assert redact_text(text) == (text if expected is None else expected)


@given(st.text())
def test_redaction_is_idempotent_and_total(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once
    assert redact_argv(redact_argv(text.split())) == redact_argv(text.split())


@given(st.sampled_from(TOKENS), st.text(alphabet=" =:,;()[]'\"", max_size=3), st.text(alphabet=" =:,;()[]'\"", max_size=3))
def test_tokens_never_survive_any_surrounding(token: str, before: str, after: str) -> None:
    text = f"{before}{token}{after}"
    for redacted in (redact_text(text), redact_value(text), " ".join(redact_argv([text]))):
        assert token not in redacted and re.search(re.escape(REDACTED), redacted)


def test_redact_facts_covers_logged_server_args() -> None:
    from driftwatch.redact import redact_facts

    facts = {"server_args": {"api_key": "letmein", "hf_token": "hf_abcdefghijklmnopqrstuvwxyz12", "tp_size": 8,
                             "model_path": "/m", "api_key_unset": "None"},
             "errors": [{"message": "auth failed for sk-abcdefabcdefabcdef123456"}]}
    out = redact_facts(facts)
    assert out["server_args"]["api_key"] == "<redacted>" and out["server_args"]["hf_token"] == "<redacted>"
    assert out["server_args"]["tp_size"] == 8 and out["server_args"]["model_path"] == "/m"
    assert "sk-abc" not in out["errors"][0]["message"]


# Every secret below holds "SEKRIT": none may survive; the host must.
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://hooks.slack.com/services/T000/B000/SEKRITxxxx", f"https://hooks.slack.com/{REDACTED}"),
        ("https://hooks.slack.com/workflows/T0/A0/1/SEKRIT", f"https://hooks.slack.com/{REDACTED}"),
        ("https://discord.com/api/webhooks/1234/SEKRIT-abc", f"https://discord.com/{REDACTED}"),
        ("https://acme.webhook.office.com/webhookb2/a-b@c-d/IncomingWebhook/SEKRIT/e",
         f"https://acme.webhook.office.com/{REDACTED}"),
        ("https://outlook.office.com/webhook/SEKRIT/IncomingWebhook/x", f"https://outlook.office.com/{REDACTED}"),
        ("https://events.pagerduty.com/integration/SEKRIT/enqueue", f"https://events.pagerduty.com/{REDACTED}"),
        ("https://chat.example.com/hooks/SEKRIT", f"https://chat.example.com/{REDACTED}"),  # Mattermost
        ("https://hooks.zapier.com/hooks/catch/1/SEKRIT/", f"https://hooks.zapier.com/{REDACTED}"),
        (("https://bucket.s3.amazonaws.com/m.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=SEKRIT%2F"
          "&X-Amz-Date=20260101T000000Z&X-Amz-Signature=SEKRIT0"), f"https://bucket.s3.amazonaws.com/m.bin?{REDACTED}"),
        ("https://storage.googleapis.com/b/o?GoogleAccessId=a&Expires=1&Signature=SEKRIT",
         f"https://storage.googleapis.com/b/o?{REDACTED}"),
        ("https://storage.googleapis.com/b/o?X-Goog-Credential=SEKRIT&X-Goog-Signature=SEKRIT",
         f"https://storage.googleapis.com/b/o?{REDACTED}"),
        ("https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig=SEKRIT%3D",
         f"https://acct.blob.core.windows.net/c/b?{REDACTED}"),
        ("https://chat.googleapis.com/v1/spaces/A/messages?key=SEKRIT&token=SEKRIT",
         f"https://chat.googleapis.com/v1/spaces/A/messages?{REDACTED}"),
        ("git+https://builduser:SEKRIT@git.example.com/org/repo.git@v1.2",
         f"git+https://builduser:{REDACTED}@git.example.com/org/repo.git@v1.2"),
        ("https://user:SEKRIT@with@at@pypi.example.com/simple", f"https://user:{REDACTED}@pypi.example.com/simple"),
        ("https://SEKRITtoken@github.com/org/repo", f"https://{REDACTED}@github.com/org/repo"),
        ("https://SEKRITkey@o1.ingest.sentry.io/42", f"https://{REDACTED}@o1.ingest.sentry.io/42"),
        ("redis://:SEKRIT@cache:6379/0", f"redis://:{REDACTED}@cache:6379/0"),
        ("see https://hooks.slack.com/services/T/B/SEKRIT).", f"see https://hooks.slack.com/{REDACTED})."),
        ("http://[::1]:8065/hooks/SEKRIT", f"http://[::1]:8065/{REDACTED}"),
    ],
)
def test_urls_lose_their_secrets_and_keep_their_host(url: str, expected: str) -> None:
    assert redact_value(url) == expected
    assert redact_value(expected) == expected
    assert "SEKRIT" not in redact_text(f"url={url!r} and {url}")


@pytest.mark.parametrize(
    "url",
    ["https://pypi.org/simple", "ssh://git@github.com/org/repo.git", "git+ssh://git@github.com/org/repo.git",
     "file:///root/sglang/python", "https://huggingface.co/meta-llama/Llama-3.1-8B?revision=main",
     "https://download.pytorch.org/whl/cu128", "https://example.com/@user/page"],
)
def test_urls_without_credentials_are_kept(url: str) -> None:
    assert redact_value(url) == url


def test_webhook_and_dsn_names_keep_only_the_host() -> None:
    env = {"SGLANG_WEBHOOK_URL": "https://hooks.example.com/notify/SEKRIT", "SENTRY_DSN": "https://SEKRIT@o1.ingest.sentry.io/4",
           "SLACK_HOOK": "SEKRIT", "DATABASE_DSN": "host=db password=SEKRIT", "DATABASE_URL": "postgres://app:SEKRIT@db/x",
           "SGLANG_URL": "http://10.0.0.1:30000/v1"}
    assert redact_env(env) == {
        "SGLANG_WEBHOOK_URL": f"https://hooks.example.com/{REDACTED}", "SENTRY_DSN": f"https://o1.ingest.sentry.io/{REDACTED}",
        "SLACK_HOOK": REDACTED, "DATABASE_DSN": REDACTED, "DATABASE_URL": f"postgres://app:{REDACTED}@db/x",
        "SGLANG_URL": "http://10.0.0.1:30000/v1"}
    argv = ["--webhook-url", "https://my.host/notify/SEKRIT", "--alert-webhook=https://a.b/SEKRIT", "--sentry-dsn", "SEKRIT",
            "--port", "1"]
    assert redact_argv(argv) == ["--webhook-url", f"https://my.host/{REDACTED}", f"--alert-webhook=https://a.b/{REDACTED}",
                                 "--sentry-dsn", REDACTED, "--port", "1"]
    text = "ServerArgs(webhook_url='https://my.host/x/SEKRIT', port=1) launch --webhook-url https://my.host/y/SEKRIT"
    assert redact_text(text) == (f"ServerArgs(webhook_url='https://my.host/{REDACTED}', port=1) launch --webhook-url "
                                 f"https://my.host/{REDACTED}")


_URL_PART = st.text(alphabet="abcXYZ09-._~%:@/?#&=+", max_size=12)


@given(st.sampled_from(["https", "http", "git+https", "ssh", "s3"]), _URL_PART, _URL_PART, st.text(max_size=6))
def test_url_redaction_is_idempotent(scheme: str, authority: str, tail: str, around: str) -> None:
    text = f"{around}{scheme}://{authority}{tail} {scheme}://u:SEKRIT@h/{tail}{around}"
    once = redact_text(text)
    assert redact_text(once) == once and redact_value(redact_value(text)) == redact_value(text)
    assert "SEKRIT" not in redact_value(text)


def test_last_pass_keeps_numbers_hashes_and_names() -> None:
    from driftwatch.redact import redact_strings

    facts = {"size": 12, "mtime": 1.7e9, "ok": True, "none": None, "sha256": "ab" * 32, "name": "torch",
             "requires": ["x @ https://u:SEKRIT@h/x.whl"], "nested": {"url": "https://hooks.slack.com/services/SEKRIT"}}
    out = redact_strings(facts)
    assert out == {**facts, "requires": [f"x @ https://u:{REDACTED}@h/x.whl"],
                   "nested": {"url": f"https://hooks.slack.com/{REDACTED}"}}
