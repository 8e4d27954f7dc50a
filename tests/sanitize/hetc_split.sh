#!/bin/sh
# hetc as the sanitizer build's end-to-end checks call it: `hetc compile` runs the hetc with the
# compiler that $HETC_SPLIT_COMPILER names (the main build's), every other command the sanitized,
# runtime-only hetc that $HETC_SPLIT_RUNTIME names. exec keeps the process the check started (a
# server's pid, signals, /proc/PID/status) the hetc itself.
if [ "$1" = compile ]; then
  exec "$HETC_SPLIT_COMPILER" "$@"
fi
exec "$HETC_SPLIT_RUNTIME" "$@"
