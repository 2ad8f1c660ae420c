package mailbox_test

import "github.com/locus-go/locus/internal/race"

const raceEnabled = race.Enabled
