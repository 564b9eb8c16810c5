#!/usr/bin/env bash
# Install the system components the harness uses, when they are missing and we can (root + apt):
#   bubblewrap (local sandbox), docker.io (dockerd for the docker backend), debootstrap (test images),
#   git and patch (patch application), Go (the `go test` runner's real-project test; cargo, javac and mvn
#   come with this kind of machine), pdflatex with booktabs (tests/unit/test_latex.py compiles every generated
#   paper_figures/*.tex: texlive-latex-base has pdflatex, texlive-latex-recommended booktabs; about 145 MB and
#   1.5 min with --no-install-recommends), and what the verified-git task set's compiled repositories build with
#   (scikit-learn, astropy and matplotlib from source: a C/C++ compiler and pkg-config; matplotlib's FreeType and
#   Qhull come from git sources, FreeType's configure script made by autotools, below), and the C/C++ toolchains of
#   the multilingual-git task set (below). Prints what is missing otherwise;
#   never fails the caller.
set -u
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v git >/dev/null 2>&1 || need+=(git)
command -v patch >/dev/null 2>&1 || need+=(patch)
command -v jq >/dev/null 2>&1 || need+=(jq)
command -v go >/dev/null 2>&1 || need+=(golang-go)
command -v pdflatex >/dev/null 2>&1 || need+=(texlive-latex-base)
command -v kpsewhich >/dev/null 2>&1 && kpsewhich booktabs.sty >/dev/null 2>&1 || need+=(texlive-latex-recommended)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
# matplotlib's pdf and eps image comparisons convert with Ghostscript (SWE-bench's images get it with imagemagick;
# without it those parametrizations are not generated: matplotlib-20859's 9 P2P `[pdf]` tests had no result)
command -v gs >/dev/null 2>&1 || need+=(ghostscript)
# the multilingual-git task set's C and C++ repositories (execcritic/tasks/mlgit/toolchain.py) and matplotlib's
# FreeType (verified-git: execcritic/tasks/git/plan.py, VENDORED): jq's autotools
# build with bison and flex, fmt's and nlohmann/json's CMake, redis' and valkey's Tcl test suite, micropython's
# libffi; and the GoogleTest its tests' C++ fixture links
command -v autoreconf >/dev/null 2>&1 || need+=(autoconf)
command -v automake >/dev/null 2>&1 || need+=(automake)
command -v libtoolize >/dev/null 2>&1 || need+=(libtool)
command -v bison >/dev/null 2>&1 || need+=(bison)
command -v flex >/dev/null 2>&1 || need+=(flex)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v tclsh >/dev/null 2>&1 || need+=(tcl)
[ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
pkg-config --exists libffi 2>/dev/null || need+=(libffi-dev)
# its JavaScript/TypeScript repositories (axios, immutable-js, vuejs/core) run on node; npm comes with it
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
# xarray's tests import cfgrib/eccodes (SWE-bench's conda env has the ecCodes library from conda-forge)
ldconfig -p 2>/dev/null | grep -q 'libeccodes\.so' || need+=(libeccodes0)
# Django's eval commands export LANG=en_US.UTF-8; without the locale its tests change behaviour
locale_missing=0
locale -a 2>/dev/null | grep -qi '^en_US\.utf-\?8$' || locale_missing=1
[ $locale_missing = 1 ] && ! command -v locale-gen >/dev/null 2>&1 && need+=(locales)
gen_locale() {
  [ $locale_missing = 1 ] || return 0
  if [ "$(id -u)" = 0 ] && command -v locale-gen >/dev/null 2>&1; then
    sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen 2>/dev/null
    grep -q '^en_US.UTF-8' /etc/locale.gen 2>/dev/null || echo 'en_US.UTF-8 UTF-8' >> /etc/locale.gen
    locale-gen >/dev/null 2>&1 && echo "system-deps: generated the en_US.UTF-8 locale"
  else
    echo "system-deps: the en_US.UTF-8 locale is missing (Django tasks need it)"
  fi
}
if [ ${#need[@]} -eq 0 ]; then gen_locale; exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}") >/tmp/execcritic-apt.log 2>&1 \
    || { echo "system-deps: apt-get failed (see /tmp/execcritic-apt.log)"; exit 0; }
  gen_locale
else
  echo "system-deps: missing ${need[*]} - install them with your package manager;" \
       "tests that need them are skipped with the reason"
fi
exit 0
