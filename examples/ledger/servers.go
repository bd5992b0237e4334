package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem/store/pgstore"
)

// startNATS starts a NATS server with JetStream in this process, on a
// free loopback port, its store in dir.
func startNATS(dir string) (*server.Server, error) {
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  filepath.Join(dir, "nats"),
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats server: not ready after 10s")
	}
	return srv, nil
}

// createDatabase creates database name on the server of adminDSN, with
// schema and the idem store's table, and returns a pool on it.
func createDatabase(ctx context.Context, adminDSN, dsn, name, schema string) (*pgxpool.Pool, error) {
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return nil, err
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// The store's table, created once here rather than by each process.
	st, err := pgstore.New(ctx, pool, pgstore.Options{})
	if err != nil {
		pool.Close()
		return nil, err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// createStream creates the stream, with its duplicate window, and the
// consumer's durable consumer.
func createStream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, jetstream.Consumer, error) {
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       streamName,
		Subjects:   []string{subject},
		Duplicates: dupWindow,
		Storage:    jetstream.FileStorage,
	})
	if err != nil {
		return nil, nil, err
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:   consumerName,
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   ackWait,
		// Every delivery counts against MaxDeliver, the naks of a message
		// whose key a dead run holds too: no limit here.
		MaxDeliver: -1,
	})
	if err != nil {
		return nil, nil, err
	}
	return stream, cons, nil
}
