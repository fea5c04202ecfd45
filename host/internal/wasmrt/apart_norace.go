//go:build !race

package wasmrt

const apartRaceCPU, apartRaceMemory = 1, 1
