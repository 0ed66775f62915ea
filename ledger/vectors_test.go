package ledger

// The illustrative key of spec/ledger.md §4.4 (never for real use).
const (
	specSeed      = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	specPublicKey = "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
	// wrongPublicKey is the public key of seed 0x42×32 (§5.4).
	wrongPublicKey = "2152f8d19b791d24453242e15f2eab6cb7cffa7b6a5ed30097960e069881db12"
)
