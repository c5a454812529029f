package pareto

import "os"

// writeFile writes data to path (0666 less the umask), replacing it.
func writeFile(path string, data []byte) error {
	return os.WriteFile(path, data, 0o666)
}
