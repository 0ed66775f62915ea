//go:build !unix

package ledger

import "time"

func processCPU() time.Duration { return 0 }
