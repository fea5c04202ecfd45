//go:build wasip1

package sdk

// callCapability passes request to a host capability function through
// kernel memory and returns its raw response. The guest owns both blocks and
// frees them, as the Extism convention for host functions has it.
func callCapability(fn CapabilityFunc, request []byte) ([]byte, error) {
	req := writeBlock(request)
	respOffset := fn(req)
	kernelFree(req)
	resp := readBlock(respOffset)
	kernelFree(respOffset)
	return resp, nil
}
