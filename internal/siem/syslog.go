package siem

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Syslog priorities: facility log audit (13), severity by outcome.
const (
	facilityLogAudit = 13
	sevInformational = 6
	sevNotice        = 5
	sevWarning       = 4
	// probeWait is how long, after a batch, the sink waits to learn
	// whether the receiver closed the connection (and with it, maybe,
	// what it had not read yet).
	probeWait = 100 * time.Millisecond
)

// syslogSink sends each event as an RFC 5424 message over TCP or TLS,
// framed by octet counting (RFC 6587 §3.4.1): "LEN SP MSG".
type syslogSink struct {
	name, addr string
	tls        *tls.Config
	dial       func(ctx context.Context, network, addr string) (net.Conn, error)
	timeout    time.Duration
	hostname   string
	procID     string

	mu   sync.Mutex
	conn net.Conn
}

func (s *syslogSink) Name() string { return s.name }

func (s *syslogSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drop()
}

func (s *syslogSink) drop() error {
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}

// Send writes the batch's messages on the sink's connection, dialling it
// when there is none or the receiver closed it. Syslog over TCP has no
// acknowledgement, so after writing, the sink waits probeWait for the
// receiver to close the connection: a receiver restarting drops what it
// had not read, and the batch is then sent again.
func (s *syslogSink) Send(ctx context.Context, b Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && closed(s.conn, time.Millisecond) {
		s.drop()
	}
	if s.conn == nil {
		if err := s.connect(ctx); err != nil {
			return err
		}
	}
	frames := make([]byte, 0, len(b.Lines)*1024)
	for _, line := range b.Lines {
		frames = appendFrame(frames, s.message(line))
	}
	_ = s.conn.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.conn.Write(frames); err != nil {
		s.drop()
		return fmt.Errorf("write to %s: %w", s.addr, err)
	}
	if closed(s.conn, probeWait) {
		s.drop()
		return fmt.Errorf("%s closed the connection: sending again", s.addr)
	}
	return nil
}

func (s *syslogSink) connect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	dial := s.dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", s.addr, err)
	}
	if s.tls != nil {
		tc := tls.Client(conn, s.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return fmt.Errorf("TLS with %s: %w", s.addr, err)
		}
		conn = tc
	}
	s.conn = conn
	return nil
}

// closed reports whether the peer closed conn (or it failed), waiting up
// to wait for a sign: a receiver of syslog never writes back, so any read
// other than a timeout means the connection is gone.
func closed(conn net.Conn, wait time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	var buf [1]byte
	_, err := conn.Read(buf[:])
	_ = conn.SetReadDeadline(time.Time{})
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout()) && !errors.Is(err, os.ErrDeadlineExceeded)
}

// message is one event as an RFC 5424 message: PRI from the event's
// severity, its time, this host, APP-NAME agentplane, PROCID the pid,
// MSGID the OCSF class, no structured data (the event carries its tenant
// and seq), and the event's JSON as MSG.
func (s *syslogSink) message(event []byte) []byte {
	var head struct {
		Time     int64 `json:"time"`
		ClassUID int   `json:"class_uid"`
		Sev      int   `json:"severity_id"`
	}
	_ = json.Unmarshal(event, &head)
	sev := sevInformational
	switch head.Sev {
	case severityLow:
		sev = sevNotice
	case severityMedium:
		sev = sevWarning
	}
	ts := time.UnixMilli(head.Time).UTC().Format("2006-01-02T15:04:05.000Z")
	var m strings.Builder
	m.Grow(len(event) + 160)
	m.WriteString("<" + strconv.Itoa(facilityLogAudit*8+sev) + ">1 " + ts + " " + field(s.hostname, 255) +
		" agentplane " + field(s.procID, 128) + " ocsf-" + strconv.Itoa(head.ClassUID) + " - ")
	m.Write(event)
	return []byte(m.String())
}

// appendFrame appends an octet-counted frame.
func appendFrame(dst, msg []byte) []byte {
	dst = strconv.AppendInt(dst, int64(len(msg)), 10)
	dst = append(dst, ' ')
	return append(dst, msg...)
}

// field is an RFC 5424 header field: printable US-ASCII, at most max
// characters, "-" when empty.
func field(s string, max int) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s) && len(out) < max; i++ {
		if c := s[i]; c > 32 && c < 127 {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return string(out)
}
