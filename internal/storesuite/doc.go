// Package storesuite holds the runtime-level checks that every shared
// store's tests run: a storm of duplicates, instances sharing keys, a
// server restarted or paused mid-run, and worker processes (one killed)
// hammering the same keys. Each store's test package supplies the store
// and its server through small adapters; the checks themselves live here
// once, so both stores are held to the same assertions.
package storesuite
