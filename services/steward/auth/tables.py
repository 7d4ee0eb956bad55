"""The tables identity owns (migrated by migrations/versions/0002_api_tokens.py): API tokens, stored
hashed, and the record of every access denial."""

from __future__ import annotations

from sqlalchemy import JSON, Column, Float, Index, Integer, MetaData, String, Table

metadata = MetaData()

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("token_id", String(32), primary_key=True),
    Column("secret_sha256", String(64), nullable=False),
    Column("subject", String(200), nullable=False),
    Column("role", String(20), nullable=False),
    Column("scopes", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("created_by", String(200), nullable=False),
    Column("expires_at", Float, nullable=True),
    Column("revoked_at", Float, nullable=True),
    Column("revoked_by", String(200), nullable=True),
)

access_denials = Table(
    "access_denials",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("subject", String(200), nullable=False),
    Column("role", String(20), nullable=False),
    Column("token_id", String(32), nullable=True),
    Column("operation", String(100), nullable=False),
    Column("target", String(300), nullable=False),
    Column("reason", String(300), nullable=False),
    Column("client", String(100), nullable=False),
    Index("ix_access_denials_at", "at"),
)
