#!/usr/bin/env bash
# Benchmark: mediafetch against curl --parallel and aria2c, side by side, in one run.
#
# Usage: scripts/bench.sh [-h|--help]
#
# Serves generated files from nginx on 127.0.0.1 and downloads every workload
# with each tool in turn (mediafetch, curl, curl+sync, aria2c, then again, each
# round starting one tool further on, every other one in reverse), so all see
# the same machine state. curl+sync is curl then sync(1): curl's cost with its
# files on disk at the end, as mediafetch's are; it is shown for context. Prints a table of wall time, CPU time,
# the server's CPU time during the run and peak RSS, writes the same numbers as JSON lines to
# $BENCH_DIR/results.jsonl, mediafetch's time over curl's (and the baseline's) round by round, and
# mediafetch's CPU floor: its CPU time and the server's spread
# over every core, the least wall time that much work can take on this machine.
#
# This measures; it does not judge. It exits 0 when every tool run succeeded,
# whatever the ratios, and non-zero when a tool failed or the setup did.
#
# Environment (defaults in brackets):
#   BENCH_DIR       work dir: workloads, nginx, logs, results [/tmp/mediafetch-bench]
#   OUT_DIR         where each run's fresh download dir is made [$BENCH_DIR]; e.g.
#                   /dev/shm to take the disk out (mediafetch's syncfs then costs nothing)
#   MEDIAFETCH_BIN  use this binary instead of building one
#   BASELINE_BIN    another mediafetch binary (an earlier commit's build), run as
#                   "baseline" beside the others in every round, so that two
#                   builds are compared in the same machine state; unset: none
#   RUNS            runs of each tool per workload [3]
#   JOBS            concurrent transfers for every tool [16]
#   SMALL_COUNT     files in the small workload [2000]
#   SMALL_SIZE_KB   size of each small file in KiB [64]
#   LARGE_COUNT     files in the large workload [8]
#   LARGE_SIZE_MB   size of each large file in MiB [64]
#
# Quick smoke run:
#   SMALL_COUNT=100 LARGE_COUNT=2 LARGE_SIZE_MB=8 RUNS=1 scripts/bench.sh
# Two builds side by side (the ratio "baseline" is the new one's time over the old's):
#   MEDIAFETCH_BIN=/tmp/mf-new BASELINE_BIN=/tmp/mf-old RUNS=5 scripts/bench.sh

set -euo pipefail

usage() { sed -n '2,/^$/{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    "") ;;
    *) echo "bench: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
esac

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_DIR="${BENCH_DIR:-/tmp/mediafetch-bench}"
RUNS="${RUNS:-3}"
JOBS="${JOBS:-16}"
SMALL_COUNT="${SMALL_COUNT:-2000}"
SMALL_SIZE_KB="${SMALL_SIZE_KB:-64}"
LARGE_COUNT="${LARGE_COUNT:-8}"
LARGE_SIZE_MB="${LARGE_SIZE_MB:-64}"
# curl+sync is curl followed by sync(1): what curl costs when its files are on
# disk at the end, as mediafetch's are (context, not the target: the target is plain curl).
TOOLS=(mediafetch curl curl+sync aria2c)

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

if [[ -n "${BASELINE_BIN:-}" ]]; then
    [[ -x "$BASELINE_BIN" ]] || die "BASELINE_BIN=$BASELINE_BIN is not an executable"
    TOOLS=(mediafetch baseline curl curl+sync aria2c)
fi

for var in RUNS JOBS SMALL_COUNT SMALL_SIZE_KB LARGE_COUNT LARGE_SIZE_MB; do
    [[ "${!var}" =~ ^[1-9][0-9]*$ ]] || die "$var must be a positive integer (got '${!var}')"
done

# --- Tools -------------------------------------------------------------------

# The machines are rebuilt from scratch, so the script installs what it uses
# rather than relying on whatever was installed by hand last time.
ensure_tools() {
    local missing=()
    command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || missing+=(nginx)
    command -v aria2c >/dev/null 2>&1 || missing+=(aria2)
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    # The shell keyword `time` cannot report peak RSS; GNU time can.
    [[ -x /usr/bin/time ]] || missing+=(time)
    command -v python3 >/dev/null 2>&1 || missing+=(python3)
    ((${#missing[@]} == 0)) && return 0

    [[ $EUID -eq 0 ]] || die "missing ${missing[*]}: install them (apt-get install ...) or run as root"
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    local packages=() p
    for p in "${missing[@]}"; do
        # nginx-light is the small build; newer Debian releases only have nginx.
        if [[ $p == nginx ]] && apt-cache show nginx-light >/dev/null 2>&1; then p=nginx-light; fi
        packages+=("$p")
    done
    apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
}
ensure_tools
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"

mkdir -p "$BENCH_DIR"
BENCH_DIR="$(cd "$BENCH_DIR" && pwd)"
WWW="$BENCH_DIR/www"
LOGS="$BENCH_DIR/logs"
RESULTS="$BENCH_DIR/results.jsonl"
OUT_DIR="${OUT_DIR:-$BENCH_DIR}"
[[ -d "$OUT_DIR" ]] || die "OUT_DIR=$OUT_DIR is not a directory"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
OUT=""
rm -rf "$LOGS"
mkdir -p "$WWW" "$LOGS"

# --- mediafetch --------------------------------------------------------------

if [[ -n "${MEDIAFETCH_BIN:-}" ]]; then
    [[ -x "$MEDIAFETCH_BIN" ]] || die "MEDIAFETCH_BIN=$MEDIAFETCH_BIN is not an executable"
    MEDIAFETCH="$MEDIAFETCH_BIN"
    MEDIAFETCH_VERSION="$MEDIAFETCH_BIN"
else
    # A scratch path of its own: a release build must not fight over .build
    # with someone's debug builds and tests running at the same time.
    # Linked statically against the Swift runtime and Foundation, as the
    # README builds it for real use: half the start-up time of a dynamic build.
    log "building mediafetch (release, static Swift runtime, .build-release; log in $BENCH_DIR/build.log)"
    build=(swift build -c release --static-swift-stdlib --product mediafetch --scratch-path "$REPO_ROOT/.build-release")
    if ! (cd "$REPO_ROOT" && "${build[@]}") >"$BENCH_DIR/build.log" 2>&1; then
        tail -n 30 "$BENCH_DIR/build.log" >&2
        die "release build failed (full log: $BENCH_DIR/build.log)"
    fi
    MEDIAFETCH="$(cd "$REPO_ROOT" && "${build[@]}" --show-bin-path)/mediafetch"
    MEDIAFETCH_VERSION="$(git -C "$REPO_ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
fi

# --- Workloads ---------------------------------------------------------------

# Random bytes, so no file compresses or deduplicates (mediafetch stores by
# content hash: equal files would be stored once and flatter it).
# Kept between invocations; the stamp says which parameters made them.
generate() { # name count bytes
    local dir="$WWW/$1" stamp="$WWW/$1.stamp" want="$2 $3"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        log "workload $1: reusing $2 files of $3 bytes"
        return
    fi
    log "workload $1: generating $2 files of $3 bytes"
    rm -rf "$dir" "$stamp"
    mkdir -p "$dir"
    python3 - "$dir" "$2" "$3" <<'EOF'
import os, sys
directory, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
chunk = 1 << 20
for i in range(1, count + 1):
    with open(os.path.join(directory, f"f{i:05d}.bin"), "wb") as f:
        left = size
        while left:
            n = min(chunk, left)
            f.write(os.urandom(n))
            left -= n
EOF
    echo "$want" >"$stamp"
}

WORKLOADS=(small large)
declare -A COUNT BYTES LABEL
COUNT[small]=$SMALL_COUNT
BYTES[small]=$((SMALL_SIZE_KB * 1024))
LABEL[small]="$SMALL_COUNT x $SMALL_SIZE_KB KiB"
COUNT[large]=$LARGE_COUNT
BYTES[large]=$((LARGE_SIZE_MB * 1024 * 1024))
LABEL[large]="$LARGE_COUNT x $LARGE_SIZE_MB MiB"
for w in "${WORKLOADS[@]}"; do generate "$w" "${COUNT[$w]}" "${BYTES[$w]}"; done

# --- nginx -------------------------------------------------------------------

NGINX_DIR="$BENCH_DIR/nginx"
NGINX_PID=""
cleanup() {
    local status=$?
    if [[ -n "$NGINX_PID" ]] && kill -0 "$NGINX_PID" 2>/dev/null; then
        kill "$NGINX_PID" 2>/dev/null || true
        wait "$NGINX_PID" 2>/dev/null || true
    fi
    [[ -z "$OUT" ]] || rm -rf "$OUT"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
rm -rf "$NGINX_DIR"
mkdir -p "$NGINX_DIR/tmp"
# One worker: on a small machine the server should not take the cores away from
# the client under test; sendfile keeps one worker far from being the limit.
cat >"$NGINX_DIR/nginx.conf" <<EOF
user root;
worker_processes 1;
daemon off;
pid $NGINX_DIR/nginx.pid;
error_log $NGINX_DIR/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    keepalive_timeout 65;
    default_type application/octet-stream;
    client_body_temp_path $NGINX_DIR/tmp/body;
    proxy_temp_path $NGINX_DIR/tmp/proxy;
    fastcgi_temp_path $NGINX_DIR/tmp/fastcgi;
    uwsgi_temp_path $NGINX_DIR/tmp/uwsgi;
    scgi_temp_path $NGINX_DIR/tmp/scgi;
    server {
        listen 127.0.0.1:$PORT;
        root $WWW;
    }
}
EOF
log "starting nginx on 127.0.0.1:$PORT"
# -e: nginx opens its default error log before it reads the config.
"$NGINX" -p "$NGINX_DIR/" -e "$NGINX_DIR/error.log" -c "$NGINX_DIR/nginx.conf" &
NGINX_PID=$!
probe="http://127.0.0.1:$PORT/small/f00001.bin"
for _ in $(seq 100); do
    curl -sf -o /dev/null "$probe" && break
    kill -0 "$NGINX_PID" 2>/dev/null || { cat "$NGINX_DIR/error.log" >&2; die "nginx exited"; }
    sleep 0.1
done
curl -sf -o /dev/null "$probe" || die "nginx does not answer on 127.0.0.1:$PORT"
# The server shares the cores with the tool under test: its CPU time per run
# (from the worker's schedstat, in nanoseconds) shows how much of the machine
# each tool left to itself.
# The worker is the master's child (field 4 of /proc/PID/stat; nginx's comm has no spaces).
NGINX_WORKER="$(awk -v master="$NGINX_PID" '$4 == master { print $1; exit }' /proc/[0-9]*/stat 2>/dev/null || true)"
[[ -n "$NGINX_WORKER" ]] || log "nginx's worker process not found: the server's CPU is not measured"
# Empty when it cannot be read; the report then shows "-".
server_cpu_ns() { [[ -n "$NGINX_WORKER" && -r /proc/$NGINX_WORKER/schedstat ]] && awk '{ print $1 }' "/proc/$NGINX_WORKER/schedstat"; true; }

# --- Per-workload inputs -----------------------------------------------------

for w in "${WORKLOADS[@]}"; do
    : >"$BENCH_DIR/$w.urls"
    : >"$BENCH_DIR/$w.curl"
    for ((i = 1; i <= COUNT[$w]; i++)); do
        printf -v name 'f%05d.bin' "$i"
        echo "http://127.0.0.1:$PORT/$w/$name" >>"$BENCH_DIR/$w.urls"
        # A config file, not argv: thousands of URLs would hit argv limits.
        printf 'url = "http://127.0.0.1:%s/%s/%s"\noutput = "%s"\n' "$PORT" "$w" "$name" "$name" >>"$BENCH_DIR/$w.curl"
    done
    # Read the sources once so the first tool measured doesn't pay for cold
    # disk reads that the others then get for free from the page cache.
    cat "$WWW/$w"/*.bin >/dev/null
done

# --- Runs --------------------------------------------------------------------

# Files and bytes under a directory (for mediafetch, its object store).
tally() { find "$1" -type f -printf '%s\n' | awk '{ n++; b += $1 } END { printf "%d %d\n", n, b }'; }

# Sets CMD to the command line of one tool run into dest.
command_for() { # tool workload dest
    local urls="$BENCH_DIR/$2.urls"
    case "$1" in
        mediafetch | baseline)
            CMD=("$([[ $1 == mediafetch ]] && echo "$MEDIAFETCH" || echo "$BASELINE_BIN")" get --cache "$3"
                --input-file "$urls" --jobs "$JOBS" --per-host "$JOBS" --progress none) ;;
        curl | curl+sync)
            CMD=(curl --parallel --parallel-max "$JOBS" --silent --show-error --fail
                --output-dir "$3" --config "$BENCH_DIR/$2.curl")
            [[ $1 == curl ]] || CMD=(bash -c '"$@" && sync' curl+sync "${CMD[@]}") ;;
        aria2c)
            # -x 1 / --split=1: one connection per file, like the other two;
            # -j caps the transfers (so the connections) at JOBS.
            # --auto-save-interval=0: no control file (.aria2) a download.
            # aria2c made one for each file and deleted it when the file was
            # done, and the tool run after it paid for the 2000 deleted inodes
            # (ext4's recently_deleted(), see below): mediafetch, right after
            # it in every round but the first until the order turned.
            CMD=(aria2c -j "$JOBS" -x 1 --split=1 -i "$urls" -d "$3"
                --console-log-level=warn --summary-interval=0 --download-result=hide
                --allow-overwrite=true --auto-file-renaming=false --file-allocation=none
                --auto-save-interval=0) ;;
    esac
}

# A directory of our own, so cleaning up never touches anything else in OUT_DIR.
OUT="$(mktemp -d "$OUT_DIR/mediafetch-bench-out.XXXXXX")"

RUN_ID="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
FAILURES=0
: >"$RESULTS"
printf '{"type":"meta","run_id":"%s","jobs":%d,"runs":%d,"mediafetch":"%s","baseline":"%s","curl":"%s","aria2c":"%s","nginx":"%s","cores":%d,"out_dir":"%s"}\n' \
    "$RUN_ID" "$JOBS" "$RUNS" \
    "$MEDIAFETCH_VERSION" "${BASELINE_BIN:-}" \
    "$(curl --version | head -n1 | cut -d' ' -f2)" \
    "$(aria2c --version | head -n1 | awk '{print $3}')" \
    "$("$NGINX" -v 2>&1 | sed 's|.*nginx/||')" \
    "$(nproc)" "$OUT_DIR" >>"$RESULTS"

measure() { # workload run tool
    local w="$1" run="$2" tool="$3"
    local dest="$OUT/$w-$tool-$run" logf="$LOGS/$w-$tool-$run.log" timef="$LOGS/$w-$tool-$run.time"
    local status=0 wall rss user sys files bytes ok=true objects load server_before server_after
    mkdir -p "$dest"
    # Flush the previous run's writeback so it isn't billed to this one.
    sync
    # Other work on the machine (a parallel build, tests) shows up here; the
    # runs are interleaved so it spreads over all tools, but it widens min/max.
    read -r load _ </proc/loadavg
    command_for "$tool" "$w" "$dest"
    # CPU seconds too: on a 2-core box they tell a lean tool from a lucky one.
    server_before=$(server_cpu_ns)
    # The wall time from the shell's clock, to the microsecond: GNU time's %e
    # has 10 ms steps, 5% of a small-file run. (EPOCHREALTIME: bash 5; a
    # locale may write its decimal point as a comma.)
    local started=${EPOCHREALTIME/,/.} ended
    /usr/bin/time -f '%e %M %U %S' -o "$timef" -- "${CMD[@]}" >"$logf" 2>&1 || status=$?
    ended=${EPOCHREALTIME/,/.}
    server_after=$(server_cpu_ns)
    # GNU time puts "Command exited with non-zero status N" before the numbers.
    read -r wall rss user sys < <(tail -n1 "$timef")
    wall=$(awk -v a="$started" -v b="$ended" 'BEGIN { printf "%.4f", b - a }')
    objects="$dest"
    [[ $tool == mediafetch || $tool == baseline ]] && objects="$dest/objects/sha256"
    read -r files bytes < <(if [[ -d "$objects" ]]; then tally "$objects"; else echo 0 0; fi)
    if ((status != 0)) || ((files != COUNT[$w])) || ((bytes != COUNT[$w] * BYTES[$w])); then
        ok=false
        FAILURES=$((FAILURES + 1))
        printf 'bench: %s failed on %s run %d: exit %d, %d of %d files, %d bytes (log: %s)\n' \
            "$tool" "$w" "$run" "$status" "$files" "${COUNT[$w]}" "$bytes" "$logf" >&2
        tail -n 10 "$logf" | sed 's/^/    /' >&2
    fi
    printf '    %-10s run %d: %7.3f s  %7.1f MiB  load %s  %s\n' "$tool" "$run" "$wall" "$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" \
        "$load" "$($ok && echo ok || echo FAILED)" >&2
    printf '{"type":"run","run_id":"%s","workload":"%s","files":%d,"file_bytes":%d,"tool":"%s","run":%d,"wall_s":%s,"peak_rss_kib":%d,"exit":%d,"files_out":%d,"bytes_out":%d,"ok":%s,"cpu_user_s":%s,"cpu_sys_s":%s,"server_cpu_s":%s,"loadavg_1m":%s}\n' \
        "$RUN_ID" "$w" "${COUNT[$w]}" "${BYTES[$w]}" "$tool" "$run" "$wall" "$rss" "$status" "$files" "$bytes" "$ok" "$user" "$sys" \
        "$(if [[ -n "$server_before" && -n "$server_after" ]]; then
               awk -v a="$server_before" -v b="$server_after" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'
           else echo null; fi)" "$load" >>"$RESULTS"
    # Outputs stay until the workload is done (see KEEP_OUTPUTS below).
    $KEEP_OUTPUTS || rm -rf "$dest"
}

for w in "${WORKLOADS[@]}"; do
    log "workload $w (${LABEL[$w]}), $RUNS run(s), $JOBS concurrent"
    # Deleting thousands of files just before the next tool creates thousands
    # makes ext4 skip the recently freed inodes one by one (recently_deleted()
    # in the inode allocator): whoever runs next pays for the previous run's
    # cleanup. So every run's output is kept until the workload is done, if
    # the disk has room for all of them.
    need_kib=$(( COUNT[$w] * BYTES[$w] / 1024 * ${#TOOLS[@]} * RUNS * 11 / 10 ))
    free_kib=$(df -Pk "$OUT" | awk 'NR == 2 { print $4 }')
    KEEP_OUTPUTS=true
    if (( free_kib < need_kib )); then
        KEEP_OUTPUTS=false
        log "not enough room to keep every run's output ($((need_kib >> 10)) MiB): each is removed after its run"
    fi
    for ((run = 1; run <= RUNS; run++)); do
        # Each round starts one tool further on, and every other round goes
        # the other way: a tool run in the same place, or after the same
        # tool, every round is billed for it (one build run twice in a row,
        # 14 rounds: 0.225 s first, 0.221 s second by the medians, the first
        # slower in 10 of 14).
        n=${#TOOLS[@]}
        for ((i = 0; i < n; i++)); do
            if ((run % 2)); then k=$(( (i + run - 1) % n )); else k=$(( (n - 1 - i + run - 1) % n )); fi
            measure "$w" "$run" "${TOOLS[k]}"
        done
    done
    rm -rf "${OUT:?}/$w-"*
done
sync

# --- Report ------------------------------------------------------------------

python3 - "$RESULTS" <<'EOF'
import json, statistics, sys

path = sys.argv[1]
records = [json.loads(line) for line in open(path)]
meta = next(r for r in records if r["type"] == "meta")
runs = [r for r in records if r["type"] == "run"]
tools = ["mediafetch"] + (["baseline"] if meta.get("baseline") else []) + ["curl", "curl+sync", "aria2c"]
workloads = list(dict.fromkeys(r["workload"] for r in runs))

def size(n):
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} B"

print()
baseline = f" | baseline {meta['baseline']}" if meta.get("baseline") else ""
print(f"mediafetch {meta['mediafetch']}{baseline} | curl {meta['curl']} | aria2c {meta['aria2c']} | "
      f"nginx {meta['nginx']} | {meta['cores']} cores | {meta['jobs']} concurrent | {meta['runs']} run(s) | "
      f"downloads into {meta['out_dir']}")
summaries = []
for w in workloads:
    rows = [r for r in runs if r["workload"] == w]
    count, each = rows[0]["files"], rows[0]["file_bytes"]
    total_mib = count * each / (1 << 20)
    print()
    print(f"{w}: {count} x {size(each)} ({total_mib:.0f} MiB)")
    print(f"  {'tool':<11}{'median s':>9}{'min s':>8}{'max s':>8}{'MiB/s':>9}{'CPU s':>8}{'srv CPU':>8}{'RSS MiB':>9}  failed")
    # (Wall times to the millisecond; CPU times as GNU time gives them, to 10 ms.)
    medians = {}
    cpus = {}
    for tool in tools:
        good = [r for r in rows if r["tool"] == tool and r["ok"]]
        failed = sum(1 for r in rows if r["tool"] == tool and not r["ok"])
        if not good:
            print(f"  {tool:<11}{'-':>9}{'-':>8}{'-':>8}{'-':>9}{'-':>8}{'-':>8}{'-':>9}  {failed}")
            continue
        walls = [r["wall_s"] for r in good]
        median = statistics.median(walls)
        rss = statistics.median(r["peak_rss_kib"] for r in good) / 1024
        rate = total_mib / median if median > 0 else float("inf")
        cpu = statistics.median(r["cpu_user_s"] + r["cpu_sys_s"] for r in good)
        measured = [r["server_cpu_s"] for r in good if r.get("server_cpu_s") is not None]
        server = statistics.median(measured) if measured else None
        medians[tool] = median
        cpus[tool] = (cpu, server)
        shown = f"{server:>8.2f}" if server is not None else f"{'-':>8}"
        print(f"  {tool:<11}{median:>9.3f}{min(walls):>8.3f}{max(walls):>8.3f}{rate:>9.0f}{cpu:>8.2f}{shown}{rss:>9.1f}  {failed}")
        summaries.append({"type": "summary", "run_id": meta["run_id"], "workload": w, "tool": tool,
                          "runs_ok": len(good), "runs_failed": failed,
                          "median_wall_s": median, "min_wall_s": min(walls), "max_wall_s": max(walls),
                          "median_peak_rss_mib": round(rss, 1), "median_cpu_s": round(cpu, 2),
                          "median_server_cpu_s": None if server is None else round(server, 3),
                          "median_mib_per_s": round(rate, 1)})
    ratios = {}
    for other in ("curl", "aria2c", "curl+sync", "baseline"):
        if "mediafetch" in medians and medians.get(other):
            ratios[other] = medians["mediafetch"] / medians[other]
    if ratios:
        print("  mediafetch median / " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items())
              + "  (below 1: mediafetch faster)")
        summaries.append({"type": "ratio", "run_id": meta["run_id"], "workload": w,
                          **{f"mediafetch_over_{k.replace('+', '_')}": round(v, 3) for k, v in ratios.items()}})
    # Round by round: the two runs of a round are minutes closer than two
    # medians, so the machine's state, which swings more than most changes
    # move the figures, is nearer the same for both.
    for other in ("curl", "baseline"):
        pairs = []
        for run in sorted({r["run"] for r in rows}):
            mine = [r for r in rows if r["run"] == run and r["tool"] == "mediafetch" and r["ok"]]
            theirs = [r for r in rows if r["run"] == run and r["tool"] == other and r["ok"]]
            if mine and theirs and theirs[0]["wall_s"] > 0:
                pairs.append(mine[0]["wall_s"] / theirs[0]["wall_s"])
        if len(pairs) > 1:
            print(f"  mediafetch / {other} round by round: " + " ".join(f"{p:.2f}" for p in pairs)
                  + f"  (median {statistics.median(pairs):.2f}x)")
            summaries.append({"type": "rounds", "run_id": meta["run_id"], "workload": w, "over": other,
                              "ratios": [round(p, 3) for p in pairs], "median": round(statistics.median(pairs), 3)})
    if "mediafetch" in cpus and cpus["mediafetch"][1] is not None and meta["cores"] > 0:
        # No run can take less wall time than its CPU time and the server's
        # spread over every core: what the machine had to give, at best.
        cpu, server = cpus["mediafetch"]
        print(f"  mediafetch's CPU floor: ({cpu:.2f} s + server {server:.2f} s) / {meta['cores']} cores = "
              f"{(cpu + server) / meta['cores']:.2f} s, the least wall time that CPU allows on this machine")
with open(path, "a") as f:
    for s in summaries:
        f.write(json.dumps(s, separators=(",", ":")) + "\n")
print()
print(f"results: {path}")
EOF

((FAILURES == 0)) || die "$FAILURES tool run(s) failed; see $LOGS"
