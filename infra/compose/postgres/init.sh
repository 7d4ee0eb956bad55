#!/bin/bash
# Runs once, when the primary's data folder is first initialised (docker-entrypoint-initdb.d): the roles
# of infra/postgres.sh (steward_owner owns the database and runs the migrations; steward_app gets its
# table rights from the migrations' GRANTs), the replication role, and Temporal's role.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v owner_pw="$PG_OWNER_PASSWORD" -v app_pw="$PG_APP_PASSWORD" -v repl_pw="$PG_REPLICATION_PASSWORD" \
  -v temporal_pw="$PG_TEMPORAL_PASSWORD" <<'SQL'
CREATE ROLE steward_owner WITH LOGIN NOSUPERUSER CREATEDB NOCREATEROLE PASSWORD :'owner_pw';
CREATE ROLE steward_app WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'app_pw';
CREATE ROLE replicator WITH LOGIN REPLICATION PASSWORD :'repl_pw';
CREATE ROLE temporal WITH LOGIN NOSUPERUSER CREATEDB NOCREATEROLE PASSWORD :'temporal_pw';
CREATE DATABASE steward OWNER steward_owner;
GRANT CONNECT, TEMPORARY ON DATABASE steward TO steward_app;
SQL
echo "host replication replicator all scram-sha-256" >>"$PGDATA/pg_hba.conf"
