package main

import "io"

func runThread(args []string, stdout, stderr io.Writer) error { return nil }
func runReport(args []string, stdout, stderr io.Writer) error { return nil }
