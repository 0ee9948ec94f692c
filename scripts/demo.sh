#!/usr/bin/env bash
# The main job end to end on this machine, against the project's own loopback
# origin (no internet needed): serve a folder of media, prefetch it with
# `mediafetch get`, interrupt nothing, re-run (zero downloads), list, list --failed, stats.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
swift build --product mediafetch
swift build --product mediafetch-origin
bin="$(swift build --show-bin-path)"

work="${DEMO_DIR:-$(mktemp -d /tmp/mediafetch-demo.XXXXXX)}"
mkdir -p "$work/media"
cache="$work/Cache"
echo "demo folder: $work"

# 200 real JPEG photos (each with its own bytes), one of them published twice,
# and a 20-second sound in each of WAV, AIFF, FLAC, Ogg Vorbis and MP3 (libsndfile).
"$bin/mediafetch-origin" --make-samples "$work/media" --photos 200

"$bin/mediafetch-origin" --root "$work/media" --port 0 --port-file "$work/port" > "$work/origin.log" &
origin=$!
trap 'kill $origin 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
base="http://127.0.0.1:$(cat "$work/port")"

{
    echo "# demo pins: photos and sounds"
    for f in "$work"/media/photos/*.jpg; do echo "$base/photos/$(basename "$f")"; done
    for f in "$work"/media/sounds/*; do echo "$base/sounds/$(basename "$f")"; done
} > "$work/urls.txt"

echo; echo "== first run: everything is downloaded"
"$bin/mediafetch" --version
"$bin/mediafetch" get --cache "$cache" --input-file "$work/urls.txt" --collection demo
echo; echo "== second run: nothing is downloaded again"
"$bin/mediafetch" get --cache "$cache" --input-file "$work/urls.txt" --collection demo
echo; echo "== a missing file fails with a clear line and exit status 1"
"$bin/mediafetch" get --cache "$cache" --retries 0 "$base/photos/missing.jpg" && exit 1 || echo "exit status $?"
echo; echo "== list (first 5 rows)"
"$bin/mediafetch" list --cache "$cache" | head -6
echo; echo "== list --kind sound (what libsndfile found in each sound)"
"$bin/mediafetch" list --cache "$cache" --kind sound --format json | grep -E '"(url|format|durationSeconds|sampleRate|channels)"'
echo; echo "== list --failed (what failed last time, and why)"
"$bin/mediafetch" list --cache "$cache" --failed
echo; echo "== stats"
"$bin/mediafetch" stats --cache "$cache"
