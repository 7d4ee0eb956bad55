"""Write the GraphQL SDL to schema/graphql/schema.graphql (`python -m steward.api.export`); with
`--check`, exit 1 when the file is stale."""

from __future__ import annotations

import sys

from steward.api.schema import sdl
from steward.config import REPO_ROOT

SDL_PATH = REPO_ROOT / "schema" / "graphql" / "schema.graphql"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    current = sdl()
    if "--check" in args:
        if not SDL_PATH.exists() or SDL_PATH.read_text() != current:
            sys.stderr.write(f"{SDL_PATH} is stale; run `python -m steward.api.export`\n")
            return 1
        return 0
    SDL_PATH.parent.mkdir(parents=True, exist_ok=True)
    SDL_PATH.write_text(current)
    print(f"wrote {SDL_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
