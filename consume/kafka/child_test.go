package kafka_test

const envChild = "IDEM_KAFKA_CHILD"

func childMain() int { return 0 }
