package benchserver

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit makes sure this process, and the servers it starts from
// now on (they inherit it), may hold at least need open files: a burst of
// synchronous invocations holds a socket per invocation at each end, and
// the server one more to the model. Past the hard limit (which Go's
// runtime already raised the soft one to) only a process with
// CAP_SYS_RESOURCE may go, up to fs.nr_open. It returns the limit in
// effect and, when that is short of need, an error saying how to get more.
func RaiseFileLimit(need uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	if lim.Cur >= need {
		return lim.Cur, nil
	}
	want := syscall.Rlimit{Cur: need, Max: max(lim.Max, need)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return lim.Cur, fmt.Errorf("this needs about %d open files and the process may hold %d (`ulimit -n`, at most `ulimit -Hn`, %d): %w; "+
			"run it where the limit is higher (with CAP_SYS_RESOURCE it raises the limit itself) or with fewer at once", need, lim.Cur, lim.Max, err)
	}
	return need, nil
}
