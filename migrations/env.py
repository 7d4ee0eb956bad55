"""Alembic environment: the schema is owned by steward.store.schema; the URL comes from the config
(the owner's URL) or from `-x url=...`."""

from __future__ import annotations

from alembic import context
from sqlalchemy import pool

from steward.config import get_settings
from steward.store.eventstore import make_engine
from steward.store.schema import metadata

config = context.config
target_metadata = metadata


def run_migrations() -> None:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        url = get_settings().resolved_owner_url
    connectable = config.attributes.get("connection")
    if connectable is not None:
        context.configure(connection=connectable, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(url) if url.startswith("sqlite") else None
    if engine is None:
        from sqlalchemy import create_engine

        engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations()
