package migrate

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// memTarget records what it applies.
type memTarget struct {
	applied []int64
	failOn  int64
}

func (m *memTarget) Init(context.Context) error               { return nil }
func (m *memTarget) Applied(context.Context) ([]int64, error) { return m.applied, nil }
func (m *memTarget) Apply(_ context.Context, mg Migration) error {
	if mg.Version == m.failOn {
		return errors.New("syntax error")
	}
	m.applied = append(m.applied, mg.Version)
	return nil
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		files   fstest.MapFS
		want    []Migration
		wantErr bool
	}{
		{
			name: "ordered by version",
			files: fstest.MapFS{
				"m/0010_later.sql":  {Data: []byte("B")},
				"m/0002_second.sql": {Data: []byte("A2")},
				"m/0001_init.sql":   {Data: []byte("A1")},
			},
			want: []Migration{{1, "init", "A1"}, {2, "second", "A2"}, {10, "later", "B"}},
		},
		{name: "bad name", files: fstest.MapFS{"m/init.sql": {}}, wantErr: true},
		{name: "zero version", files: fstest.MapFS{"m/0000_x.sql": {}}, wantErr: true},
		{name: "duplicate version", files: fstest.MapFS{"m/0001_a.sql": {}, "m/1_b.sql": {}}, wantErr: true},
		{name: "missing dir", files: fstest.MapFS{}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Load(tc.files, "m")
			if (err != nil) != tc.wantErr {
				t.Fatalf("Load: err = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRun(t *testing.T) {
	ms := []Migration{{Version: 1, Name: "a"}, {Version: 2, Name: "b"}, {Version: 3, Name: "c"}}
	tests := []struct {
		name      string
		target    memTarget
		wantN     int
		wantAfter []int64
		wantErr   bool
	}{
		{name: "fresh", wantN: 3, wantAfter: []int64{1, 2, 3}},
		{name: "partly applied", target: memTarget{applied: []int64{1}}, wantN: 2, wantAfter: []int64{1, 2, 3}},
		{name: "up to date", target: memTarget{applied: []int64{1, 2, 3}}, wantN: 0, wantAfter: []int64{1, 2, 3}},
		{name: "newer database", target: memTarget{applied: []int64{1, 2, 3, 4}}, wantN: 0, wantAfter: []int64{1, 2, 3, 4}, wantErr: true},
		{name: "failure stops", target: memTarget{failOn: 2}, wantN: 1, wantAfter: []int64{1}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := Run(t.Context(), &tc.target, ms)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Run: err = %v, wantErr %v", err, tc.wantErr)
			}
			if n != tc.wantN {
				t.Errorf("applied %d, want %d", n, tc.wantN)
			}
			if diff := cmp.Diff(tc.wantAfter, tc.target.applied); diff != "" {
				t.Errorf("applied versions (-want +got):\n%s", diff)
			}
		})
	}
}
