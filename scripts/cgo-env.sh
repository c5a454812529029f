# Source it (`. scripts/cgo-env.sh`) before building or testing by hand; scripts/test.sh does.
#
# go-nvml's cgo code calls NVML functions that NVIDIA's header marks deprecated: each time the
# package is compiled or vetted, the C compiler prints ~150 lines of -Wdeprecated-declarations
# warnings (harmless). This exports CGO_CFLAGS as the C flags go would use anyway (from the
# environment or `go env -w`, default "-O2 -g") plus -Wno-deprecated-declarations, once.
cgo_cflags="$(go env CGO_CFLAGS)"
case " $cgo_cflags " in
  *" -Wno-deprecated-declarations "*) export CGO_CFLAGS="$cgo_cflags" ;;
  *) export CGO_CFLAGS="${cgo_cflags:+$cgo_cflags }-Wno-deprecated-declarations" ;;
esac
unset cgo_cflags
