module gpunode.test/real/bed

go 1.26.0
