package keyshard_test

import (
	"fmt"

	"github.com/idemrt/idem/keyshard"
)

func ExampleHash() {
	fmt.Printf("%#x\n", keyshard.Hash("a"))
	// Output:
	// 0xaf63dc4c8601ec8c
}

func ExampleIndex() {
	const shards = 16
	for _, key := range []string{"order-42", "user:1001", "order-42"} {
		fmt.Println(key, "->", keyshard.Index(key, shards))
	}
	// Output:
	// order-42 -> 6
	// user:1001 -> 2
	// order-42 -> 6
}
