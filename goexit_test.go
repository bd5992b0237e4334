package idem_test

import "runtime"

func runtimeGoexit() { runtime.Goexit() }
