//go:build !linux

package proc

type exitWatch interface {
	Exited() (bool, error)
	Close()
}

func watchExit(int) exitWatch { return nil }
