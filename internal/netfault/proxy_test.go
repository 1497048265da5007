package netfault

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo is a loopback server answering each line with itself.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn) (string, error) {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// TestCutEndsConnectionsUntilRestore checks the three states a fault
// harness relies on: forwarding, cut (open connections end, new ones are
// closed at once) and restored.
func TestCutEndsConnectionsUntilRestore(t *testing.T) {
	p, err := Listen(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c); err != nil || got != "ping\n" {
		t.Fatalf("before the cut: %q, %v", got, err)
	}

	p.Cut()
	if _, err := roundTrip(c); err == nil {
		t.Fatal("an open connection still answers after Cut")
	}
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		if _, err := roundTrip(c2); err == nil {
			t.Fatal("a new connection answers while cut")
		}
		c2.Close()
	}

	p.Restore()
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3); err != nil || got != "ping\n" {
		t.Fatalf("after Restore: %q, %v", got, err)
	}
}
