#!/usr/bin/env bash
# Usage: clone-under-tmp.sh ROOT
#
# What the VM test runs from (tools/test.sh): a place like the one a user who clones under /tmp
# has, which the guest covers with a tmpfs. A real clone of ROOT (`git clone` of its commit, as a
# user gets it) under /tmp, and its `.build` reached through /tmp as well, as a clone built in
# /tmp has it: a link in /tmp to ROOT's build (built once, not again). Changes not committed are
# not in the clone (said on stderr); a ROOT that is no git repository (an unpacked archive) is
# copied instead. Prints the clone's path, then the build link's folder: the caller removes both.
set -euo pipefail
root=$(cd "${1:?usage: clone-under-tmp.sh ROOT}" && pwd)
vmcopy=$(mktemp -d /tmp/cuff-vm-clone.XXXXXX)
vmbuild=$(mktemp -d /tmp/cuff-vm-build.XXXXXX)
trap 'rm -rf "$vmcopy" "$vmbuild"' ERR
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
    echo "note: changes not committed are not in the VM test's clone" >&2
  fi
  git clone --no-hardlinks -q "$root" "$vmcopy"
else
  tar -C "$root" --exclude=./.build --exclude=./.build-tsan -cf - . | tar -C "$vmcopy" -xf -
fi
ln -s "$(readlink -f "$root/.build")" "$vmbuild/build"
ln -s "$vmbuild/build" "$vmcopy/.build"
echo "$vmcopy"
echo "$vmbuild"
