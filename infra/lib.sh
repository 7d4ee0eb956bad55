# shellcheck shell=bash
# Common helpers for the infra/*.sh service scripts. Source it; do not run it.
#
#   STEWARD_RUN_DIR   run folder (default: <repo>/.run); logs in $RUN/logs, PID files in $RUN/pids
#   STEWARD_WAIT_TIMEOUT  default seconds to wait for a service to answer (default 90)

set -euo pipefail

INFRA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$INFRA_DIR/.." && pwd)"
RUN_DIR="${STEWARD_RUN_DIR:-$REPO_DIR/.run}"
LOG_DIR="$RUN_DIR/logs"
PID_DIR="$RUN_DIR/pids"
# shellcheck disable=SC2034 # used by the scripts that source this file
WAIT_TIMEOUT="${STEWARD_WAIT_TIMEOUT:-90}"
# shellcheck disable=SC2034
BIND_HOST=127.0.0.1

mkdir -p "$RUN_DIR" "$LOG_DIR" "$PID_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"   # absolute from here on
LOG_DIR="$RUN_DIR/logs"
# the stack user's services log here; jobs run as their projects' users (docs/security.md "Jobs") and must
# not read it: the folder is this user's alone (PostgreSQL, which runs as `postgres`, logs in a 0700 folder
# of its own, infra/postgres.sh)
if [[ -O $LOG_DIR ]]; then chmod 700 "$LOG_DIR"; fi
PID_DIR="$RUN_DIR/pids"

_svc="${STEWARD_SVC:-$(basename "${0%.sh}")}"

log()  { printf '%s [%s] %s\n' "$(date +%H:%M:%S)" "$_svc" "$*" >&2; }
warn() { printf '%s [%s] WARNING: %s\n' "$(date +%H:%M:%S)" "$_svc" "$*" >&2; }
die()  { printf '%s [%s] ERROR: %s\n' "$(date +%H:%M:%S)" "$_svc" "$*" >&2; exit 1; }

# now_ms: wall clock in milliseconds (for timings in messages)
now_ms() { date +%s%3N; }

# port_open HOST PORT: 0 when something accepts a TCP connection there.
port_open() {
  local host=$1 port=$2
  (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

# pid_from_file FILE: prints the PID stored in FILE (empty when none).
pid_from_file() {
  local f=$1
  [[ -s $f ]] || return 0
  local pid
  pid="$(tr -dc '0-9' <"$f")"
  printf '%s' "$pid"
}

# pid_alive PID [PATTERN]: the process exists (and, with PATTERN, its command line contains it,
# which guards against a PID reused by an unrelated process after a reboot or crash).
pid_alive() {
  local pid=$1 pattern=${2:-}
  [[ -n $pid ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  if [[ -n $pattern ]]; then
    [[ -r /proc/$pid/cmdline ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$pattern" || return 1
  fi
  # a zombie is not alive
  [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]]
}

# running_pid PIDFILE PATTERN: prints the live PID from PIDFILE, or nothing (and removes a stale file).
running_pid() {
  local f=$1 pattern=$2 pid
  pid="$(pid_from_file "$f")"
  if [[ -n $pid ]] && pid_alive "$pid" "$pattern"; then
    printf '%s' "$pid"
  elif [[ -e $f ]]; then
    rm -f "$f"
  fi
}

# lock_service NAME: serialises start/stop/install of one service across concurrent callers (e.g. several
# test workers running `services.sh up` at once). Held on fd 9 until the script exits; anything
# long-lived that we spawn must close fd 9 (start_daemon does) or it would keep the lock.
lock_service() {
  local name=$1
  mkdir -p "$RUN_DIR/locks"
  exec 9>"$RUN_DIR/locks/$name.lock"
  if ! flock -w "${STEWARD_LOCK_TIMEOUT:-300}" 9; then
    die "another infra script holds $RUN_DIR/locks/$name.lock"
  fi
}

# start_daemon PIDFILE LOGFILE CMD...: runs CMD detached (own session, no stdin, stdout+stderr
# appended to LOGFILE) and writes its PID to PIDFILE. The PID is the CMD process itself (exec).
start_daemon() {
  local pidfile=$1 logfile=$2
  shift 2
  rm -f "$pidfile"
  # shellcheck disable=SC2016 # $$, $0 and $@ belong to the inner bash
  nohup setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" >>"$logfile" 2>&1 </dev/null 9>&- &
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -s $pidfile ]] && return 0
    sleep 0.05
  done
  die "could not start: $* (see $logfile)"
}

# rotate_log FILE: keep one previous log (FILE.1) so each start begins a fresh file.
rotate_log() {
  local f=$1
  if [[ -s $f ]]; then mv -f "$f" "$f.1"; fi
  : >"$f"
}

# wait_for_port NAME HOST PORT TIMEOUT PID LOGFILE: waits until HOST:PORT accepts connections.
# Fails early, with the end of the log, when the process PID dies first.
wait_for_port() {
  local name=$1 host=$2 port=$3 timeout=$4 pid=$5 logfile=$6
  local deadline=$((SECONDS + timeout))
  until port_open "$host" "$port"; do
    if [[ -n $pid ]] && ! pid_alive "$pid"; then
      fail_with_log "$name exited before $host:$port answered" "$logfile"
    fi
    if ((SECONDS >= deadline)); then
      fail_with_log "$name did not answer on $host:$port within ${timeout}s (pid $pid)" "$logfile"
    fi
    sleep 0.2
  done
}

# fail_with_log MESSAGE LOGFILE: prints the last lines of LOGFILE and exits 1.
fail_with_log() {
  local msg=$1 logfile=$2
  if [[ -f $logfile ]]; then
    printf '%s\n' "----- last 30 lines of $logfile -----" >&2
    tail -n 30 "$logfile" >&2 || true
    printf '%s\n' "-----" >&2
  fi
  die "$msg; full log: $logfile"
}

# wait_gone PID SECONDS: waits until PID has exited (a zombie counts as gone); 1 when it is still there.
wait_gone() {
  local pid=$1 seconds=$2
  local deadline=$((SECONDS + seconds))
  while pid_alive "$pid"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# wait_until NAME TIMEOUT PID LOGFILE WHAT CMD...: runs CMD (quietly) until it succeeds; fails with the end
# of LOGFILE when the process PID dies first or TIMEOUT seconds pass ("NAME not WHAT within ...").
wait_until() {
  local name=$1 timeout=$2 pid=$3 logfile=$4 what=$5
  shift 5
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    pid_alive "$pid" || fail_with_log "$name exited during startup" "$logfile"
    ((SECONDS < deadline)) || fail_with_log "$name not $what within ${timeout}s" "$logfile"
    sleep 0.2
  done
}

# already_running NAME PID WHERE: when PID is set, logs that NAME already runs there and returns 0.
already_running() {
  local name=$1 pid=$2 where=$3
  [[ -n $pid ]] || return 1
  log "$name already running (pid $pid) on $where"
}

# stop_service NAME PIDFILE PID GRACE_SECONDS [CMD...]: the one way every service stops. Asks PID to stop
# (CMD, the service's own graceful stop, when given; SIGTERM otherwise), waits up to GRACE_SECONDS, then
# SIGKILL; removes PIDFILE. No-op (logged) when PID is empty.
stop_service() {
  local name=$1 pidfile=$2 pid=$3 grace=$4
  shift 4
  if [[ -z $pid ]]; then
    log "$name is not running"
    rm -f "$pidfile"
    return 0
  fi
  log "stopping $name (pid $pid)"
  if (($#)); then
    "$@" || warn "$name: '$*' failed; waiting for the process, then SIGKILL"
  else
    kill -TERM "$pid" 2>/dev/null || true
  fi
  if ! wait_gone "$pid" "$grace"; then
    warn "$name (pid $pid) still running after ${grace}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 5 || warn "$name (pid $pid) is still there after SIGKILL"
  fi
  rm -f "$pidfile"
  log "$name stopped"
}

# stop_pid NAME PIDFILE PATTERN [GRACE_SECONDS]: stop_service for a daemon started by start_daemon.
stop_pid() {
  local name=$1 pidfile=$2 pattern=$3 grace=${4:-30}
  stop_service "$name" "$pidfile" "$(running_pid "$pidfile" "$pattern")" "$grace"
}

# service_status NAME PID READY WHERE LOGFILE RUNNING_FN: the status line of a service, and its exit code
# (0 running, 3 otherwise). READY is 0 when the service answers at WHERE; RUNNING_FN prints the
# "running" details (version, pid, addresses), called only then.
service_status() {
  local name=$1 pid=$2 ready=$3 where=$4 logfile=$5 running_fn=$6
  if [[ -n $pid ]] && ((ready == 0)); then
    echo "$name $("$running_fn" "$pid"); log $logfile"
    return 0
  fi
  if [[ -n $pid ]]; then
    echo "$name starting or unhealthy (pid $pid, $where not answering); log $logfile"
  else
    echo "$name not running"
  fi
  return 3
}

# lock_if_changing NAME ACTION: the commands that change a service (install, start, stop, restart) hold
# its lock (lock_service); status and the read-only commands do not wait for it.
lock_if_changing() {
  case "$2" in
    install | start | stop | restart) lock_service "$1" ;;
  esac
}

# check_port_free NAME HOST PORT: dies when something else already listens there.
check_port_free() {
  local name=$1 host=$2 port=$3
  if port_open "$host" "$port"; then
    die "$host:$port is already in use by another process (not our $name); stop it or set another port"
  fi
}

# usage_die "cmd1|cmd2": prints usage and exits 2.
usage_die() {
  printf 'usage: %s %s\n' "$(basename "$0")" "$1" >&2
  exit 2
}

# find_go: prints the Go toolchain's path (PATH, then the usual install places); 1 when there is none.
find_go() {
  local cand
  for cand in "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go/bin/go; do
    if [[ -n $cand && -x $cand ]]; then
      printf '%s' "$cand"
      return 0
    fi
  done
  return 1
}

# apt_install PKG...: installs Debian packages (as root), running `apt-get update` first when the
# package lists are empty or the first attempt fails.
apt_install() {
  [[ $(id -u) -eq 0 ]] || die "need root to apt-get install $*"
  command -v apt-get >/dev/null || die "apt-get not found; install $* by hand"
  export DEBIAN_FRONTEND=noninteractive
  if ! compgen -G '/var/lib/apt/lists/*_Packages' >/dev/null; then
    log "apt-get update"
    apt-get update -qq >&2
  fi
  log "apt-get install -y $*"
  if ! apt-get install -y -qq --no-install-recommends "$@" >&2; then
    log "apt-get update (retry)"
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "$@" >&2
  fi
}
