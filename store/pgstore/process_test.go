package pgstore_test

const envWorker = "IDEM_TEST_WORKER"

func workerMain(string) int { return 0 }
