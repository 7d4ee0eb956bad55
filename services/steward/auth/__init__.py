"""Identity and roles: who is asking (JWTs from an OIDC provider or HS256 on one machine, and API tokens
for the CLI) and what they may see and do (admin, manager, researcher, auditor)."""
