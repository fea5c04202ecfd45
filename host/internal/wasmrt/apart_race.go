//go:build race

package wasmrt

// A race-enabled build compiles about 10 times slower, in twice the
// memory (the sqlite plugin: 19.5 s of CPU and 234 MB, against 2.0 s and
// 81 MB): its compile processes get room for that.
const apartRaceCPU, apartRaceMemory = 5, 2
