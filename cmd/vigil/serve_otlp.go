package main

import (
	"cmp"
	"fmt"
	"os"

	"github.com/vigilhq/vigil/otlp"
)

// otlpSettings resolves OTLP ingest (docs/configuration.md): the otlp
// section (enabled, default_dataset) and limits.max_otlp_bytes, with
// VIGIL_OTLP_ENABLED, VIGIL_OTLP_DEFAULT_DATASET and
// VIGIL_LIMITS_MAX_OTLP_BYTES over the file. on is false when disabled.
func otlpSettings(fc *fileConfig) (cfg otlp.Config, on bool, err error) {
	if on, err = envBoolOr("VIGIL_OTLP_ENABLED", fc.OTLP.Enabled, true); err != nil || !on {
		return cfg, false, err
	}
	cfg.DefaultDataset = cmp.Or(os.Getenv("VIGIL_OTLP_DEFAULT_DATASET"), fc.OTLP.DefaultDataset, "otel")
	if d := otlp.DatasetName("", "", cfg.DefaultDataset); d != cfg.DefaultDataset {
		return cfg, false, fmt.Errorf("otlp.default_dataset %q: want a dataset name of A-Z, a-z, 0-9, - and _ (at most 100)", cfg.DefaultDataset)
	}
	if cfg.MaxBodyBytes, err = envSize("VIGIL_LIMITS_MAX_OTLP_BYTES"); err != nil {
		return cfg, false, err
	}
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, int64(fc.Limits.MaxOTLPBytes))
	return cfg, true, nil
}
