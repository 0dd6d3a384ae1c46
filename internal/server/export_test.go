package server

// SetLandlockABI makes the gateways created until restore is called see
// the kernel's Landlock support as abi says.
func SetLandlockABI(abi func() (int, error)) (restore func()) {
	saved := landlockABI
	landlockABI = abi
	return func() { landlockABI = saved }
}
