#!/usr/bin/env bash
# Builds the libFuzzer targets: compiles swift-system (which Transport uses) and the library modules the targets need (CuffCore,
# BloodPressure, GATT, Omron, CuffSimulator, CuffSession, StoreFormat, Transport, Capture, DBus) with swiftc directly, instrumented for libFuzzer
# and AddressSanitizer, then links one binary per target in tools/fuzz/Targets/.
# SwiftPM is not involved, so `swift build` / `swift test` never see a LLVMFuzzerTestOneInput.
#   bash tools/fuzz/build.sh            → .build-fuzz/bin/<Target>
#   FUZZ_OPT=-Onone bash tools/fuzz/build.sh   (faster to compile, slower to run)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
out="${FUZZ_BUILD_DIR:-$root/.build-fuzz}"
opt="${FUZZ_OPT:--O}"
swiftc="${SWIFTC:-swiftc}"
mkdir -p "$out/modules" "$out/obj" "$out/bin"
# Two runs at once (one target each) share the module objects: one builds, the other waits.
exec 9> "$out/build.lock"
flock 9
flags=(-sanitize=fuzzer,address -parse-as-library -package-name cuff "$opt" -g -use-ld=lld -I "$out/modules" -I "$root/Sources/CEpoll/include" -I "$root/tools/fuzz/CSQLite" -module-cache-path "$out/module-cache")

# The C module Transport imports (epoll as plain arrays): one object, not instrumented.
if [ ! -f "$out/obj/CEpoll.o" ] || [ Sources/CEpoll/cepoll.c -nt "$out/obj/CEpoll.o" ]; then
  echo "fuzz build: module CEpoll (C)"
  "${CC:-clang}" -O2 -g -I Sources/CEpoll/include -c Sources/CEpoll/cepoll.c -o "$out/obj/CEpoll.o"
fi

# apple/swift-system (Transport's file calls), from the checkout SwiftPM resolved: its C shims and
# its SystemPackage module, with the flags its Package.swift gives (one availability macro per
# version it lists, all with its source availability; SYSTEM_PACKAGE; the Lifetimes feature).
sys="$root/.build/checkouts/swift-system"
[ -d "$sys/Sources/System" ] || swift package resolve > /dev/null
flags+=(-I "$sys/Sources/CSystem/include")
if [ ! -f "$out/obj/CSystem.o" ] || [ "$sys/Sources/CSystem/shims.c" -nt "$out/obj/CSystem.o" ]; then
  echo "fuzz build: module CSystem (C, swift-system)"
  "${CC:-clang}" -O2 -g -I "$sys/Sources/CSystem/include" -c "$sys/Sources/CSystem/shims.c" -o "$out/obj/CSystem.o"
fi
if [ ! -f "$out/obj/SystemPackage.o" ] || [ "$sys/Package.swift" -nt "$out/obj/SystemPackage.o" ]; then
  echo "fuzz build: module SystemPackage (swift-system)"
  sysflags=(-D SYSTEM_PACKAGE -enable-experimental-feature Lifetimes)
  for v in $(grep -o 'Available("[0-9.]*"' "$sys/Package.swift" | grep -o '[0-9.][0-9.]*'); do
    sysflags+=(-enable-experimental-feature "AvailabilityMacro=System $v:macOS 10.10, iOS 8.0, watchOS 2.0, tvOS 9.0, visionOS 1.0")
  done
  mapfile -t syssrcs < <(find "$sys/Sources/System" -name '*.swift' | sort)
  "$swiftc" "${flags[@]}" "${sysflags[@]}" -module-name SystemPackage -wmo -whole-module-optimization \
    -emit-module -emit-module-path "$out/modules/SystemPackage.swiftmodule" \
    -c "${syssrcs[@]}" -o "$out/obj/SystemPackage.o"
fi

# Modules in dependency order, each compiled whole-module into one object. A module is rebuilt when
# one of its sources is newer than its stamp, or when the object of a module it imports changed
# (swiftc leaves an object it would write identically untouched).
modules=(CuffCore BloodPressure GATT Omron CuffSimulator CuffSession StoreFormat Transport Capture DBus)
upstream=0
for m in "${modules[@]}"; do
  obj="$out/obj/$m.o"
  stampfile="$out/obj/$m.stamp"
  # Every source of the module, its subfolders too (CuffSession/Protocol, CuffSession/Omron).
  mapfile -t srcs < <(find "Sources/$m" -name '*.swift' | sort)
  newest=$(stat -c %Y "${srcs[@]}" | sort -n | tail -n 1)
  if [ "$upstream" -gt "$newest" ]; then newest=$upstream; fi
  if [ ! -f "$obj" ] || [ ! -f "$stampfile" ] || [ "$(stat -c %Y "$stampfile")" -lt "$newest" ]; then
    echo "fuzz build: module $m"
    "$swiftc" "${flags[@]}" -module-name "$m" -wmo -whole-module-optimization \
      -emit-module -emit-module-path "$out/modules/$m.swiftmodule" \
      -c "${srcs[@]}" -o "$obj"
    touch "$stampfile"
  fi
  o=$(stat -c %Y "$obj")
  if [ "$o" -gt "$upstream" ]; then upstream=$o; fi
done
stamp=$upstream

objs=("$out/obj/CEpoll.o" "$out/obj/CSystem.o" "$out/obj/SystemPackage.o")
for m in "${modules[@]}"; do objs+=("$out/obj/$m.o"); done
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tools/fuzz/Targets/*.swift; do targets+=("$(basename "$f" .swift)"); done
fi
for t in "${targets[@]}"; do
  bin="$out/bin/$t"
  src="tools/fuzz/Targets/$t.swift"
  if [ ! -f "$bin" ] || [ "$src" -nt "$bin" ] || [ "$(stat -c %Y "$bin")" -lt "$stamp" ]; then
    echo "fuzz build: target $t"
    # A target that imports CSQLite (the store reader) links Debian's libsqlite3, not instrumented.
    libs=(-lm)
    if grep -q '^import CSQLite' "$src"; then libs+=(-lsqlite3); fi
    "$swiftc" "${flags[@]}" -module-name "$t" "$src" "${objs[@]}" "${libs[@]}" -o "$bin"
  fi
done
