package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/agentd/agentd/internal/auth"
)

// keys runs `agentd keys hash`: it reads one API key from stdin (so that
// the key stays out of the shell's history and the process list) and
// prints its SHA-256, which is all auth.api_keys holds of it.
func keys(args []string, stdin io.Reader, stdout io.Writer) error {
	positional, err := parseFlags(newFlagSet("agentd keys", usages["keys"]), args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	// Not the flag package's error, which would show a key given as a
	// flag.
	if err != nil || len(positional) != 1 || positional[0] != "hash" {
		return errors.New("usage: agentd keys hash < key-file (prints the key's sha256 for auth.api_keys)")
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	key := strings.TrimSpace(line)
	if key == "" {
		return errors.New("agentd keys hash: no key on stdin")
	}
	_, err = fmt.Fprintln(stdout, auth.HashKey(key))
	return err
}
