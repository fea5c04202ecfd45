package host

// PastChange is pastChange for the tests of package host_test.
var PastChange = pastChange
