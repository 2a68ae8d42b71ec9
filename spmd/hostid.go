package spmd
