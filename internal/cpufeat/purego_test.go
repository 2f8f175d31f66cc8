//go:build !purego

package cpufeat

const purego = false
