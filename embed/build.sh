#!/usr/bin/env bash
# Builds libkvgate into build/embed/: wasm2c turns build/release.wasm into C, gcc compiles it with the wasm2c
# runtime and embed/c into libkvgate.a and libkvgate.so, then the C example, the test drivers and the bench host. Idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# KVGATE_MEMCHECK=bounds (default): every linear-memory access is bounds-checked, so every trap, out-of-bounds
# included, comes back as KVGATE_E_TRAP and the library installs no signal handler. KVGATE_MEMCHECK=guard: guard
# pages instead of checks (faster), no handler either, so an out-of-bounds access inside the core (a core bug; host
# input is validated before it reaches the core) kills the process with SIGSEGV. Written to build/embed-guard/.
memcheck="${KVGATE_MEMCHECK:-bounds}"
case "$memcheck" in
  bounds) out="$root/build/embed"; mflags=(-DWASM_RT_MEMCHECK_SIGNAL_HANDLER=0) ;;
  guard) out="$root/build/embed-guard"; mflags=(-DWASM_RT_MEMCHECK_SIGNAL_HANDLER=1 -DWASM_RT_SKIP_SIGNAL_RECOVERY=1) ;;
  *) echo "embed: KVGATE_MEMCHECK must be bounds or guard" >&2; exit 1 ;;
esac
wasm="$root/build/release.wasm"
rt="${WASM2C_RUNTIME:-/usr/share/wabt/wasm2c}"
cc="${CC:-gcc}"
[ -f "$wasm" ] || { echo "embed: $wasm missing: run npm run build:wasm first" >&2; exit 1; }
command -v wasm2c >/dev/null || { echo "embed: wasm2c not found: apt-get install wabt" >&2; exit 1; }
[ -f "$rt/wasm-rt-impl.c" ] || { echo "embed: wasm2c runtime not found in $rt (set WASM2C_RUNTIME)" >&2; exit 1; }
mkdir -p "$out/gen" "$out/obj" "$out/bin" "$out/include"
exec 9>"$out/.lock"
flock 9
inputs=("$wasm" "$0" "$root"/embed/c/* "$root"/embed/examples/*.c "$root"/test/embed/*.c "$root"/bench/*.c)
stamp="$out/.stamp"
if [ -f "$stamp" ] && [ -z "$(find "${inputs[@]}" -newer "$stamp" 2>/dev/null)" ]; then
  exit 0
fi
# Scalar release build: wasm2c's SIMD output needs a newer runtime.
cp "$wasm" "$out/gen/kvgate_core.wasm"
wasm2c "$out/gen/kvgate_core.wasm" -n kvgate_core -o "$out/gen/kvgate_core.c"
cflags=(-O2 -fPIC -fvisibility=hidden "${mflags[@]}" -I"$out/gen" -I"$rt" -I"$root/embed/c")
"$cc" "${cflags[@]}" -w -c "$out/gen/kvgate_core.c" -o "$out/obj/kvgate_core.o" &
core=$!
"$cc" "${cflags[@]}" -w -c "$rt/wasm-rt-impl.c" -o "$out/obj/wasm-rt-impl.o"
objs=("$out/obj/kvgate_core.o" "$out/obj/wasm-rt-impl.o")
for src in "$root"/embed/c/*.c; do
  obj="$out/obj/$(basename "${src%.c}").o"
  "$cc" "${cflags[@]}" -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -c "$src" -o "$obj"
  objs+=("$obj")
done
wait "$core"
rm -f "$out/libkvgate.a"
ar rcs "$out/libkvgate.a" "${objs[@]}"
"$cc" -shared -o "$out/libkvgate.so" "${objs[@]}" -lm
cp "$root/embed/c/kvgate.h" "$out/include/kvgate.h"
for src in "$root"/embed/examples/*.c "$root"/test/embed/*.c "$root"/bench/*.c; do
  [ -f "$src" ] || continue
  "$cc" -O2 -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -I"$out/include" "$src" "$out/libkvgate.a" -lm \
    -o "$out/bin/$(basename "${src%.c}")"
done
touch "$stamp"
echo "embed: built $out/libkvgate.a, $out/libkvgate.so and $(ls "$out/bin" | tr '\n' ' ')"
