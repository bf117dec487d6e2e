// Command cuda-sample stands in for NVIDIA's CUDA vectorAdd sample
// (nvcr.io/nvidia/k8s/cuda-sample:vectoradd-*) on machines without a GPU.
// It prints the sample's lines (cuda-samples Samples/0_Introduction/
// vectorAdd/vectorAdd.cu) when the nvidia runtime gave the container a GPU,
// which the fake GPUs' CDI spec records in NVIDIA_GPU_UUIDS, and fails as
// the sample fails without one.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("[Vector addition of 50000 elements]")
	uuids := os.Getenv("NVIDIA_GPU_UUIDS")
	if uuids == "" {
		fmt.Fprintln(os.Stderr, "Failed to allocate device vector A (error code no CUDA-capable device is detected)!")
		os.Exit(1)
	}
	fmt.Println("GPU:", uuids)
	fmt.Println("Copy input data from the host memory to the CUDA device")
	fmt.Println("CUDA kernel launch with 196 blocks of 256 threads")
	fmt.Println("Copy output data from the CUDA device to the host memory")
	fmt.Println("Test PASSED")
	fmt.Println("Done")
}
