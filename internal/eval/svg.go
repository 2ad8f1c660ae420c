package eval

func WriteFigures(dir string, sb *Scoreboard) ([]string, error) { return nil, nil }
