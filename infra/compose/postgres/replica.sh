#!/bin/bash
# The streaming replica: on its first start copy the primary (pg_basebackup -R writes the standby
# configuration), then run the image's entrypoint as usual (it skips initdb: the folder is not empty).
set -euo pipefail
if [[ ! -s $PGDATA/PG_VERSION ]]; then
  until pg_isready -q -h "$PRIMARY_HOST" -p 5432; do echo "waiting for $PRIMARY_HOST"; sleep 2; done
  rm -rf "${PGDATA:?}"/*
  PGPASSWORD="$PG_REPLICATION_PASSWORD" pg_basebackup -h "$PRIMARY_HOST" -p 5432 -U replicator \
    -D "$PGDATA" -R -X stream -c fast
  chmod 0700 "$PGDATA"
fi
exec docker-entrypoint.sh "$@"
