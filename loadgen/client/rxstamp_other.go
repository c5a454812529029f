//go:build !linux

package client

import "net"

// rxTimestamps returns c: kernel receive timestamps are read on Linux only.
func rxTimestamps(c net.Conn) net.Conn { return c }

func lastRx(net.Conn) int64 { return 0 }

func primeRxTimestamps() {}
