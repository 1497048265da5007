package benchserver

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit makes sure this process, and the servers it starts from
// now on (they inherit it), may hold at least need open files: a burst of
// synchronous invocations holds a socket per invocation at each end, and
// the server one more to the model. It raises the soft limit to the hard
// one, and the hard one too where the process is allowed to (root, or
// CAP_SYS_RESOURCE, up to fs.nr_open). It returns the limit in effect and
// an error that says how to get more when that is still short of need.
func RaiseFileLimit(need uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	if lim.Cur >= need {
		return lim.Cur, nil
	}
	want := syscall.Rlimit{Cur: need, Max: max(lim.Max, need)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
		return need, nil
	}
	// Not allowed past the hard limit: take what it allows.
	want = syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return lim.Cur, fmt.Errorf("raise the open-file limit to %d: %w", lim.Max, err)
	}
	if lim.Max < need {
		return lim.Max, fmt.Errorf("this needs about %d open files and the process may hold %d (its hard limit, `ulimit -Hn`); "+
			"run it where the limit is higher (with CAP_SYS_RESOURCE it raises the limit itself) or with fewer at once", need, lim.Max)
	}
	return lim.Max, nil
}
