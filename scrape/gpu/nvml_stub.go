//go:build !(cgo && linux)

package gpu

func openNVML() (Library, error) {
	return nil, notAvailable("this build has no NVML support (needs cgo on Linux)")
}
