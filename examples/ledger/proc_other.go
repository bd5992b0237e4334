//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing here: only Linux can have a process killed
// when its parent dies. A step's process still exits when its standard
// input closes (the parent is gone).
func dieWithParent(*exec.Cmd) {}
