#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Apply one of the repository's overlays to a source tree:
#   - new files under the overlay directories are copied in;
#   - edits to existing files are patches, applied in their series order.
# Only files whose content changes are rewritten, so the build sees exactly
# what changed. Files the overlay no longer carries are restored from the
# pristine copy kept when they were first touched.
#
# usage: overlay.sh TREE
#
# The kernel's overlay by default; OVERLAY_ROOT (a directory of the
# repository), OVERLAY_DIRS (its directories of new files) and
# OVERLAY_PATCHES (its directory of patches, with a series file) name
# another (tools/rdma-core for rdma-core). Symbolic links in the overlay
# are copied as the files they point to.

. "$(dirname "$0")/lib.sh"

TREE=${1:?usage: overlay.sh TREE}
STATE=$TREE/.overlay
PRISTINE=$STATE/pristine
mkdir -p "$PRISTINE"

OVERLAY_ROOT=${OVERLAY_ROOT:-.}
OVERLAY_DIRS=${OVERLAY_DIRS:-drivers rust include Documentation}
OVERLAY_PATCHES=${OVERLAY_PATCHES:-kernel/patches}

# Save the pristine version of a kernel file (or mark it absent) before
# the overlay first changes it.
save_pristine() {
	local f=$1
	[ -e "$PRISTINE/$f" ] || [ -e "$PRISTINE/$f.absent" ] && return 0
	mkdir -p "$(dirname "$PRISTINE/$f")"
	if [ -e "$TREE/$f" ]; then
		cp -p "$TREE/$f" "$PRISTINE/$f"
	else
		touch "$PRISTINE/$f.absent"
	fi
}

# Install $2 as tree file $1 if its content differs.
install_file() {
	local f=$1 src=$2
	if ! cmp -s "$src" "$TREE/$f"; then
		save_pristine "$f"
		mkdir -p "$(dirname "$TREE/$f")"
		cp "$src" "$TREE/$f.overlay-tmp"
		mv -f "$TREE/$f.overlay-tmp" "$TREE/$f"
		echo "  overlay $f" >&2
	fi
}

restore_file() {
	local f=$1
	if [ -e "$PRISTINE/$f" ]; then
		install_file "$f" "$PRISTINE/$f"
	elif [ -e "$PRISTINE/$f.absent" ]; then
		rm -f "$TREE/$f"
		echo "  removed $f" >&2
	fi
}

cd "$TOP/$OVERLAY_ROOT"
new_manifest=$(mktemp)
stage=$(mktemp -d)
trap 'rm -rf "$new_manifest" "$stage"' EXIT

# 1. Patches to existing files, applied to pristine copies in a stage.
series=$OVERLAY_PATCHES/series
patched=""
if [ -f "$series" ]; then
	while read -r p; do
		case "$p" in '' | '#'*) continue ;; esac
		for f in $(sed -n 's,^+++ b/\([^[:space:]]*\).*,\1,p' "$OVERLAY_PATCHES/$p"); do
			case " $patched " in *" $f "*) continue ;; esac
			patched="$patched $f"
			save_pristine "$f"
			mkdir -p "$(dirname "$stage/$f")"
			if [ -e "$PRISTINE/$f" ]; then cp "$PRISTINE/$f" "$stage/$f"; fi
		done
		patch -s -p1 -d "$stage" --no-backup-if-mismatch <"$OVERLAY_PATCHES/$p" ||
			die "patch $p does not apply to $TREE"
	done <"$series"
fi
for f in $patched; do
	install_file "$f" "$stage/$f"
	echo "$f" >>"$new_manifest"
done

# 2. New files.
dirs=$(for d in $OVERLAY_DIRS; do if [ -d "$d" ]; then echo "$d"; fi; done)
# shellcheck disable=SC2086
find -L $dirs -type f | sort | while read -r f; do
	case " $patched " in *" $f "*) die "$f is both an overlay file and patched" ;; esac
	install_file "$f" "$f"
	echo "$f" >>"$new_manifest"
done

# 3. What the overlay carried before and no longer does.
if [ -f "$STATE/manifest" ]; then
	sort -u "$new_manifest" | comm -23 <(sort -u "$STATE/manifest") - | while read -r f; do
		restore_file "$f"
	done
fi
sort -u "$new_manifest" >"$STATE/manifest"
