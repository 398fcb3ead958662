"""Presentation at the edge: everything that prints. Nothing else imports rich."""
