//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing here: only Linux can have a process killed
// when its parent dies. The consumer processes still stop when their
// standard input closes (the parent is gone); a redis-server left behind
// by a killed example holds nothing but its test data.
func dieWithParent(*exec.Cmd) {}
