"""Run the Alembic migrations programmatically (as the schema owner)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from steward.config import REPO_ROOT


def alembic_config(url: str) -> Config:
    cfg = Config(str(REPO_ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(REPO_ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str) -> None:
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(url), "head")


def store_problem(url: str) -> str | None:
    """Why `url` is no Steward store this code reads, in one line that says what to do (None: it is one, at the
    newest migration): an SQLite file that does not exist (a reader does not create it), a file that is not a
    database, a database no migration was applied to, or a store at another migration. A server that cannot be
    reached is the caller's to report (sqlalchemy's OperationalError)."""
    from alembic.script import ScriptDirectory
    from sqlalchemy import create_engine, inspect, make_url, text
    from sqlalchemy.exc import DatabaseError, OperationalError

    where = make_url(url).render_as_string(hide_password=True)
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///").partition("?")[0]
        if path and path != ":memory:" and not Path(path).is_file():
            what = "a folder" if Path(path).is_dir() else "no such file"
            return (f"no store at {path} ({what}): `steward migrate` creates one, STEWARD_STORE_URL names "
                    "another")
    engine = create_engine(url)  # no pragmas: checking a file changes nothing in it
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                return f"{where} is not a Steward store (no migration applied): `steward migrate` makes it one"
            rev = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except OperationalError:
        raise
    except DatabaseError as err:
        return f"{where} is not a database ({str(err.orig).splitlines()[0] if err.orig else err})"
    finally:
        engine.dispose()
    scripts = ScriptDirectory.from_config(alembic_config(url))
    head = scripts.get_current_head()
    if rev == head:
        return None
    if rev not in {script.revision for script in scripts.walk_revisions()}:  # a newer steward migrated it
        return (f"{where} is at migration {rev}, which this steward does not know (it reads {head}): a newer "
                "steward migrated it; use that version (`steward migrate` cannot take a store back)")
    return f"{where} is at migration {rev}, this steward reads {head}: run `steward migrate`"
